import { randomBytes } from 'node:crypto';
import path from 'node:path';
import {
  getLlama,
  LlamaChat,
  LlamaLogLevel,
  TokenBias,
  type ChatWrapper,
  type GbnfJsonSchema,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { buildChatPrompt, parseAction, type OutputMode } from './chat-prompt.js';
import { BadRequestError, type ChatRequest } from './chat-request.js';

/**
 * One loaded GGUF model with `parallel` sequences, split over `contexts` llama.cpp contexts. Each
 * context decodes its sequences as one batch on its own thread, so on a CPU two single-threaded
 * contexts use two cores without llama.cpp's threads spin-waiting on each other. Each request
 * holds one sequence for its whole generation; requests beyond `parallel` wait in FIFO order. A free sequence whose
 * cached tokens share the longest prefix with the new prompt is preferred, so multi-turn agent
 * episodes re-evaluate only their newest messages.
 */
export interface EngineOptions {
  modelPath: string;
  contextSize: number;
  parallel: number;
  threads: number;
  /** llama.cpp contexts the sequences are split over (at most `parallel`; default 1). */
  contexts?: number;
  gpu?: boolean;
}

export interface ChatCompletion {
  message: {
    role: 'assistant';
    content: string | null;
    tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  };
  finish_reason: 'stop' | 'length' | 'tool_calls';
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

export interface LlmEngine {
  readonly modelId: string;
  readonly contextSize: number;
  readonly parallel: number;
  stats(): { busy: number; queued: number };
  complete(req: ChatRequest, signal?: AbortSignal): Promise<ChatCompletion>;
  close(): Promise<void>;
}

/** `SmolLM2-135M-Instruct.Q4_1.gguf` → `smollm2-135m-instruct-q4_1`. */
export function modelIdFromPath(modelPath: string): string {
  return path
    .basename(modelPath)
    .replace(/\.gguf$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-');
}

export async function loadLlmEngine(opts: EngineOptions): Promise<LlmEngine> {
  const n = Math.max(1, Math.min(opts.contexts ?? 1, opts.parallel));
  const llama = await getLlama({
    gpu: opts.gpu ? 'auto' : false,
    build: 'never',
    // The addon's thread budget is shared by all contexts: each context gets its `threads`.
    maxThreads: opts.threads * n,
    logLevel: LlamaLogLevel.error,
  });
  let model: LlamaModel | undefined;
  const contexts: LlamaContext[] = [];
  try {
    model = await llama.loadModel({ modelPath: opts.modelPath });
    for (let i = 0; i < n; i++) {
      // The sequences are shared out evenly (the first takes any remainder); contextSize is per sequence.
      const sequences = Math.floor(opts.parallel / n) + (i === 0 ? opts.parallel % n : 0);
      contexts.push(await model.createContext({ contextSize: opts.contextSize, sequences, threads: opts.threads }));
    }
    return new Engine(llama, model, contexts, modelIdFromPath(opts.modelPath));
  } catch (e) {
    for (const c of contexts) await c.dispose();
    await model?.dispose();
    await llama.dispose();
    throw e;
  }
}

interface Slot {
  sequence: LlamaContextSequence;
  chat: LlamaChat;
  context: LlamaContext;
}

/**
 * Prompt tokens a free sequence's cached prefix must save to be preferred over one in a context
 * with one fewer busy sequence: each context decodes on its own core, so spreading requests over
 * the contexts is worth re-evaluating a shared system prompt.
 */
const BUSY_CONTEXT_TOKENS = 256;

class Engine implements LlmEngine {
  readonly contextSize: number;
  readonly parallel: number;
  private readonly free: Slot[];
  private readonly chatWrapper: ChatWrapper;
  private readonly compactJson: TokenBias;
  private readonly waiting: { grant: (s: Slot) => void }[] = [];
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  private closed = false;

  constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly contexts: LlamaContext[],
    readonly modelId: string,
  ) {
    this.contextSize = Math.min(...contexts.map((c) => c.contextSize));
    this.parallel = contexts.reduce((n, c) => n + c.totalSequences, 0);
    this.free = contexts.flatMap((context) =>
      Array.from({ length: context.totalSequences }, () => {
        const sequence = context.getSequence();
        return { sequence, chat: new LlamaChat({ contextSequence: sequence }), context };
      }),
    );
    this.chatWrapper = this.free[0].chat.chatWrapper;
    this.compactJson = whitespaceBan(model);
  }

  stats() {
    return { busy: this.parallel - this.free.length, queued: this.waiting.length };
  }

  async complete(req: ChatRequest, signal?: AbortSignal): Promise<ChatCompletion> {
    if (this.closed) throw new Error('LLM engine is closed');
    const prompt = buildChatPrompt(req);
    const promptTokens = this.chatWrapper
      .generateContextState({ chatHistory: prompt.history })
      .contextText.tokenize(this.model.tokenizer);
    const room = this.contextSize - promptTokens.length - 1;
    if (room < 1) {
      throw new BadRequestError(
        'messages',
        `prompt is ${promptTokens.length} tokens but the context holds ${this.contextSize}`,
        'context_length_exceeded',
      );
    }
    const grammar = await this.grammarFor(prompt.output);
    const slot = await this.acquire(promptTokens, signal);
    let completionTokens = 0;
    try {
      const requested = req.max_completion_tokens ?? req.max_tokens ?? undefined;
      const penalties = req.frequency_penalty || req.presence_penalty;
      const r = await slot.chat.generateResponse(prompt.history, {
        grammar,
        maxTokens: Math.min(requested ?? room, room),
        temperature: req.temperature ?? 1,
        topP: req.top_p ?? undefined,
        seed: req.seed ?? undefined,
        customStopTriggers: req.stop == null ? undefined : [req.stop].flat(),
        tokenBias: grammar ? this.compactJson : undefined,
        repeatPenalty: penalties
          ? { frequencyPenalty: req.frequency_penalty ?? undefined, presencePenalty: req.presence_penalty ?? undefined }
          : undefined,
        signal,
        onToken: (t: Token[]) => {
          completionTokens += t.length;
        },
      });
      const truncated = r.metadata.stopReason === 'maxTokens';
      const usage = {
        prompt_tokens: promptTokens.length,
        completion_tokens: completionTokens,
        total_tokens: promptTokens.length + completionTokens,
      };
      return { ...toMessage(r.response, prompt.output, truncated), usage };
    } finally {
      this.release(slot);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.contexts) await c.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }

  private grammarFor(output: OutputMode): Promise<LlamaGrammar | undefined> {
    if (output.kind === 'text') return Promise.resolve(undefined);
    const schema: GbnfJsonSchema | undefined = output.schema;
    const key = schema ? JSON.stringify(schema) : 'json';
    let g = this.grammars.get(key);
    if (!g) {
      // The generic typing is for literal schemas; these are built at run time.
      g = schema ? this.llama.createGrammarForJsonSchema(schema as never) : this.llama.getGrammarFor('json');
      // Bounded cache: agents reuse a handful of tool sets and response schemas.
      if (this.grammars.size >= 64) this.grammars.delete(this.grammars.keys().next().value as string);
      this.grammars.set(key, g);
      g.catch(() => this.grammars.delete(key));
    }
    return g;
  }

  private acquire(promptTokens: Token[], signal?: AbortSignal): Promise<Slot> {
    signal?.throwIfAborted();
    if (this.free.length) {
      const busy = (c: LlamaContext) => c.totalSequences - this.free.filter((s) => s.context === c).length;
      let best = 0;
      let bestScore = -Infinity;
      this.free.forEach((s, i) => {
        const score = commonPrefix(s.sequence.contextTokens, promptTokens) - BUSY_CONTEXT_TOKENS * busy(s.context);
        if (score > bestScore) [best, bestScore] = [i, score];
      });
      return Promise.resolve(this.free.splice(best, 1)[0]);
    }
    return new Promise((resolve, reject) => {
      const waiter = { grant: resolve };
      this.waiting.push(waiter);
      signal?.addEventListener(
        'abort',
        () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(signal.reason);
          }
        },
        { once: true },
      );
    });
  }

  private release(slot: Slot): void {
    const next = this.waiting.shift();
    if (next) next.grant(slot);
    else this.free.push(slot);
  }
}

/**
 * JSON grammars allow optional newlines and indentation, which small models love and which cost
 * about half the tokens of a tool call. A strong negative logit on whitespace-only tokens keeps
 * output compact while the grammar can still take them where it requires them (its closing
 * newlines). Not the `'never'` bias: node-llama-cpp 3.21.1 then crashes the sampler with "Unexpected
 * empty grammar stack" as an unhandled rejection.
 */
function whitespaceBan(model: LlamaModel): TokenBias {
  const bias = new TokenBias(model.tokenizer);
  const vocabSize = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
  for (let t = 0; t < vocabSize; t++) {
    const text = model.detokenize([t as Token]);
    if (text.length > 0 && text.trim() === '') bias.set(t as Token, { logit: -8 });
  }
  return bias;
}

function toMessage(text: string, output: OutputMode, truncated: boolean): Omit<ChatCompletion, 'usage'> {
  const finish_reason = truncated ? 'length' : 'stop';
  if (output.kind === 'text') return { message: { role: 'assistant', content: text }, finish_reason };
  if (output.kind === 'json') return { message: { role: 'assistant', content: compactJson(text) }, finish_reason };
  const action = parseAction(text);
  // A cut-short action cannot be turned into a tool call; the raw text goes back with 'length'.
  if (!action) return { message: { role: 'assistant', content: text.trim() }, finish_reason: 'length' };
  if (action.type === 'message') {
    const content = typeof action.content === 'string' ? action.content : JSON.stringify(action.content);
    return { message: { role: 'assistant', content }, finish_reason };
  }
  const call = {
    id: `call_${randomBytes(12).toString('hex')}`,
    type: 'function' as const,
    function: { name: action.name, arguments: JSON.stringify(action.arguments) },
  };
  return { message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' };
}

function compactJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text.trim();
  }
}

function commonPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
