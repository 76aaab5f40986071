#!/usr/bin/env node
// The `trace` command: registers tsx's loader in this process, then runs the TypeScript CLI.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
