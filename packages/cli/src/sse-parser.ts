/** One Server-Sent Event as it came over the wire. */
export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Incremental text/event-stream parser (the WHATWG rules that matter here): lines end in LF,
 * CR or CRLF, `:` lines are comments (heartbeats), an empty line dispatches, several `data:`
 * lines join with LF, `retry:` sets the reconnect delay. Feed it decoded text in any chunking.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | undefined;
  private sawCr = false;
  /** Last `id:` seen (what to send as Last-Event-ID when reconnecting). */
  lastEventId: string | undefined;
  retryMs: number | undefined;

  feed(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    let start = 0;
    let input = text;
    // A CRLF split across chunks: the LF belongs to the CR already handled.
    if (this.sawCr && input.startsWith('\n')) input = input.slice(1);
    this.sawCr = false;
    for (let i = 0; i < input.length; i++) {
      const c = input[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(this.buffer + input.slice(start, i), out);
      this.buffer = '';
      if (c === '\r') {
        if (i + 1 < input.length) {
          if (input[i + 1] === '\n') i++;
        } else this.sawCr = true;
      }
      start = i + 1;
    }
    this.buffer += input.slice(start);
    return out;
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === '') {
      if (this.data.length > 0) out.push({ id: this.id, event: this.event || 'message', data: this.data.join('\n') });
      this.data = [];
      this.event = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        if (!value.includes('\0')) {
          this.id = value;
          this.lastEventId = value;
        }
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
    }
  }
}
