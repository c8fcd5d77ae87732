import { request } from 'node:http';

export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
}

export interface SseConnection {
  status: Promise<number>;
  messages: SseMessage[];
  comments: string[];
  ended: Promise<void>;
  /** Waits (bounded) until `predicate` holds over what has arrived. */
  waitFor(predicate: (c: SseConnection) => boolean, timeoutMs?: number): Promise<void>;
  close(): void;
}

/** A small real SSE client over node:http (no EventSource in Node 20). */
export function openSse(url: string, headers: Record<string, string>): SseConnection {
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  let resolveStatus!: (n: number) => void;
  let resolveEnded!: () => void;
  const status = new Promise<number>((r) => {
    resolveStatus = r;
  });
  const ended = new Promise<void>((r) => {
    resolveEnded = r;
  });
  const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
    resolveStatus(res.statusCode ?? 0);
    res.setEncoding('utf8');
    let buffer = '';
    res.on('data', (chunk: string) => {
      buffer += chunk;
      for (let idx = buffer.indexOf('\n\n'); idx >= 0; idx = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, idx);
        buffer = buffer.slice(idx + 2);
        const msg: SseMessage = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comments.push(line.slice(1).trim());
          else if (line.startsWith('id: ')) msg.id = line.slice(4);
          else if (line.startsWith('event: ')) msg.event = line.slice(7);
          else if (line.startsWith('data: ')) msg.data = line.slice(6);
        }
        if (msg.id !== undefined || msg.data !== undefined) messages.push(msg);
      }
    });
    res.on('end', () => resolveEnded());
    res.on('close', () => resolveEnded());
  });
  req.on('error', () => resolveEnded());
  req.end();
  const conn: SseConnection = {
    status,
    messages,
    comments,
    ended,
    async waitFor(predicate, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(conn)) {
        if (Date.now() > deadline) throw new Error(`SSE condition not met within ${timeoutMs} ms; got ${JSON.stringify(messages)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close() {
      req.destroy();
    },
  };
  return conn;
}
