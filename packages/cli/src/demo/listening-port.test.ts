import { describe, expect, it } from 'vitest';
import { ListeningPort } from './demo-runner.js';

describe("ListeningPort: a demo service's port, from its own listening line", () => {
  it('takes the port of the first listening line of each service kind, and nothing else', () => {
    for (const msg of ['api started', 'worker started', 'node agent listening']) {
      const l = new ListeningPort();
      l.look('(node:1) Warning: something with "port" in it');
      l.look(JSON.stringify({ level: 30, port: 5432, msg: 'connected to postgres' }));
      l.look(JSON.stringify({ level: 30, port: 0, msg }));
      expect(l.port).toBeUndefined();
      l.look(JSON.stringify({ level: 30, port: 41305, msg }));
      l.look(JSON.stringify({ level: 30, port: 1, msg }));
      expect(l.port).toBe(41305);
    }
  });
});
