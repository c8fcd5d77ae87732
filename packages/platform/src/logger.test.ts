import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { componentLogger, createLogger, jobLogger } from './logger.js';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[]; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      callback();
    },
  });
  return {
    stream,
    text: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

const TOKEN = 'tok-3f9a0c7e55d14b2f';
const REPO_KEY = 'repo-key-7d1e2b9c';

describe('createLogger', () => {
  it('writes JSON lines with name, level and message', () => {
    const out = capture();
    const logger = createLogger({ level: 'info', name: 'api', destination: out.stream });
    logger.info({ backup: 'nightly' }, 'backup started');
    logger.debug('not at info level');
    const [line, ...rest] = out.lines();
    expect(rest).toEqual([]);
    expect(line).toMatchObject({ name: 'api', level: 30, backup: 'nightly', msg: 'backup started' });
    expect(typeof line?.time).toBe('string');
  });

  it('never writes a token, an authorization header or the repository key', () => {
    const out = capture();
    const logger = createLogger({ level: 'trace', name: 'api', destination: out.stream });
    const configResult = loadConfig({ STOWAGE_API_TOKENS: TOKEN, STOWAGE_REPO_KEY: REPO_KEY });
    if (!configResult.ok) throw new Error('config');
    logger.info({ token: TOKEN }, 'top level');
    logger.info({ headers: { authorization: `Bearer ${TOKEN}` } }, 'headers');
    logger.info({ req: { method: 'GET', headers: { authorization: `Bearer ${TOKEN}`, cookie: `s=${TOKEN}` } } }, 'request');
    logger.info({ config: configResult.config }, 'config');
    logger.info({ env: { STOWAGE_API_TOKENS: TOKEN, STOWAGE_REPO_KEY: REPO_KEY } }, 'env');
    logger.info({ repoKey: REPO_KEY, options: { repoKey: REPO_KEY, password: TOKEN } }, 'options');
    componentLogger(logger, 'auth').warn({ tokens: [TOKEN] }, 'child');
    expect(out.text()).not.toContain(TOKEN);
    expect(out.text()).not.toContain(REPO_KEY);
    expect(out.lines()).toHaveLength(7);
    expect(out.lines()[1]).toMatchObject({ headers: { authorization: '[redacted]' } });
    // Redaction hides values, not the rest of the object.
    expect(out.lines()[2]).toMatchObject({ req: { method: 'GET' } });
  });

  it('serialises errors under err with message and stack', () => {
    const out = capture();
    const logger = createLogger({ level: 'info', name: 'worker', destination: out.stream });
    logger.error({ err: new Error('boom', { cause: new Error('root') }) }, 'job failed');
    const [line] = out.lines();
    expect(line?.err).toMatchObject({ type: 'Error', message: 'boom: root' }); // pino appends causes
    expect(String((line?.err as { stack?: string } | undefined)?.stack)).toContain('Error: boom');
  });

  it('carries job context on child loggers, leaving out what is unknown', () => {
    const out = capture();
    const logger = createLogger({ level: 'info', name: 'worker', destination: out.stream });
    jobLogger(componentLogger(logger, 'item-block'), {
      backup: 'nightly',
      block: 'blk-1',
      jobId: 'nightly.blk-1',
      attempt: 2,
      requestId: undefined,
    }).info('block done');
    const [line] = out.lines();
    expect(line).toMatchObject({ component: 'item-block', backup: 'nightly', block: 'blk-1', jobId: 'nightly.blk-1', attempt: 2 });
    expect(line).not.toHaveProperty('requestId');
  });
});
