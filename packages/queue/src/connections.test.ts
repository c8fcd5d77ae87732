import { describe, expect, it } from 'vitest';
import { parseRedisTarget } from './connections.js';

describe('parseRedisTarget', () => {
  it('keeps a redis:// URL for one server', () => {
    expect(parseRedisTarget('redis://127.0.0.1:6379/2')).toEqual({ kind: 'single', url: 'redis://127.0.0.1:6379/2' });
  });

  it('reads the seed nodes, credentials and TLS of a cluster URL', () => {
    expect(parseRedisTarget('rediss+cluster://app:p%40ss@10.0.0.1:7000,redis-1,[::1]:7002')).toEqual({
      kind: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-1', port: 6379 },
        { host: '::1', port: 7002 },
      ],
      tls: true,
      username: 'app',
      password: 'p@ss',
    });
    expect(parseRedisTarget('redis+cluster://:secret@h:1')).toEqual({
      kind: 'cluster',
      nodes: [{ host: 'h', port: 1 }],
      tls: false,
      password: 'secret',
    });
  });

  it('names the node that is not host:port', () => {
    expect(() => parseRedisTarget('redis+cluster://h:1,h:99999')).toThrow(/node "h:99999" is not host:port/);
    expect(() => parseRedisTarget('redis+cluster://h:1/0?x=1')).toThrow(/use redis\+cluster:\/\/host:port,host:port/);
  });
});
