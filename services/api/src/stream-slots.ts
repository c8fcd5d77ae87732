import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { bearerToken } from './auth.js';

/** How many event streams the api serves at once: per caller and in all (each live stream holds a Redis connection). */
export interface StreamCaps {
  perCaller: number;
  total: number;
}

export const DEFAULT_STREAM_CAPS: Readonly<StreamCaps> = Object.freeze({ perCaller: 20, total: 500 });

/**
 * Who is calling, for per-caller bounds: a hash of the bearer token (never the token itself), else
 * of the console's session cookie, else the client address (auth disabled).
 */
export function callerKey(req: FastifyRequest): string {
  const secret = bearerToken(req.headers.authorization) ?? req.headers.cookie;
  return secret ? `t:${createHash('sha256').update(secret).digest('hex').slice(0, 32)}` : `ip:${req.ip}`;
}

/** The open event streams of one api process, counted per caller and in all. */
export class StreamSlots {
  private readonly perCaller = new Map<string, number>();
  private total = 0;

  constructor(readonly caps: StreamCaps = DEFAULT_STREAM_CAPS) {}

  /** Takes a slot for `caller`, or says which cap is full; `release` gives it back (once). */
  acquire(caller: string): { ok: true; release: () => void } | { ok: false; why: string } {
    const mine = this.perCaller.get(caller) ?? 0;
    if (mine >= this.caps.perCaller)
      return { ok: false, why: `this token already has ${mine} event streams open (at most ${this.caps.perCaller})` };
    if (this.total >= this.caps.total)
      return { ok: false, why: `the api serves ${this.total} event streams already (at most ${this.caps.total})` };
    this.perCaller.set(caller, mine + 1);
    this.total++;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.perCaller.get(caller) ?? 1) - 1;
        if (left > 0) this.perCaller.set(caller, left);
        else this.perCaller.delete(caller);
      },
    };
  }

  get open(): number {
    return this.total;
  }
}
