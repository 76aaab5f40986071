import type { createCpuActivities, createGpuActivities } from '../workers/activities.js';

/**
 * The activities the workflows call, one type per task queue, taken from what the workers register
 * (a type-only import: workflow code never loads activity implementations).
 */
export type CpuActivities = ReturnType<typeof createCpuActivities>;
export type GpuActivities = ReturnType<typeof createGpuActivities>;
