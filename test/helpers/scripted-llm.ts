import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A test double of an external LLM service that speaks the real OpenAI HTTP protocol on loopback.
 * Each chat-completions request is answered by the script: a reply (text, tool calls or raw JSON
 * content), an HTTP error (500, 429 with Retry-After), malformed output, or a hang (for timeouts).
 */
/** The tokens a reply reports it used (default 10 of prompt, 5 of completion), and whether its cap cut it. */
type Usage = { promptTokens?: number; truncated?: boolean };

export type ScriptedReply =
  | ({ content: string; toolCalls?: undefined } & Usage)
  | ({ content?: string | null; toolCalls: { name: string; arguments: string; id?: string }[] } & Usage)
  | { status: number; headers?: Record<string, string>; body?: string }
  | { hang: true };

export interface ChatRequest {
  model: string;
  messages: { role: string; content?: string | null; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string } }[];
  response_format?: { type: string; json_schema?: { name: string; schema: unknown } };
  temperature?: number;
  [k: string]: unknown;
}

export type Script = (req: ChatRequest, index: number) => ScriptedReply | Promise<ScriptedReply>;

export interface ScriptedLlm {
  baseURL: string;
  requests: ChatRequest[];
  /** Hanging requests whose client went away (aborted, timed out), with the time it did. */
  disconnects: { index: number; at: number }[];
  close(): Promise<void>;
}

export async function startScriptedLlm(script: Script, model = 'scripted-model'): Promise<ScriptedLlm> {
  const requests: ChatRequest[] = [];
  const disconnects: ScriptedLlm['disconnects'] = [];
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', owned_by: 'test' }] }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404).end();
      return;
    }
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as ChatRequest;
    const index = requests.push(body) - 1;
    const reply = await script(body, index);
    if ('hang' in reply) {
      hanging.add(res);
      res.on('close', () => hanging.delete(res) && disconnects.push({ index, at: Date.now() }));
      return;
    }
    if ('status' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(reply.body ?? JSON.stringify({ error: { message: `scripted ${reply.status}` } }));
      return;
    }
    const toolCalls = reply.toolCalls?.map((c, i) => ({
      id: c.id ?? `call_${index}_${i}`,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
    const message = {
      role: 'assistant',
      content: reply.content ?? null,
      ...(toolCalls ? { tool_calls: toolCalls } : {}),
    };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `chatcmpl-${index}`,
        object: 'chat.completion',
        created: 0,
        model: body.model ?? model,
        choices: [{ index: 0, message, finish_reason: reply.truncated ? 'length' : toolCalls ? 'tool_calls' : 'stop' }],
        usage: {
          prompt_tokens: reply.promptTokens ?? 10,
          completion_tokens: 5,
          total_tokens: (reply.promptTokens ?? 10) + 5,
        },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    disconnects,
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Numbers the episodes a scripted policy plays, when they are played in lockstep (the trainer's
 * batches: every episode's first turn, then every one's second): an episode's first request (no
 * tool call yet) takes the next number, and the ids of the calls the policy makes (`callId`)
 * carry it through the episode's later requests.
 */
export function episodeNumbers() {
  let next = 0;
  const calls = (req: ChatRequest) =>
    req.messages.flatMap((m) => (m.role === 'assistant' && m.tool_calls ? (m.tool_calls as { id: string }[]) : []));
  return {
    of(req: ChatRequest): number {
      const [first] = calls(req);
      return first ? Number(/^ep(\d+)_/.exec(first.id)?.[1] ?? 0) : next++;
    },
    callId: (episode: number, req: ChatRequest) => `ep${episode}_${calls(req).length}`,
  };
}
