import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import { BACKUP_PHASES, BLOCK_STATES, ENDED_BACKUP_PHASES, formatBytes, PVB_PHASES } from '@stowage/core';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

/** The console's static files: plain HTML, CSS and ES modules, no build step. */
export const CONSOLE_ROOT = fileURLToPath(new URL('../ui/', import.meta.url));

/**
 * Everything the page may load comes from this origin: no CDN, no web fonts, no inline script.
 * `connect-src 'self'` also keeps a compromised page from sending the token anywhere else.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const FILE_PATTERN = /^[a-z0-9][a-z0-9-]*\.(js|css|svg)$/;

/**
 * `/ui/stowage.js`: what the console shares with the rest of Stowage, from its one source in
 * @stowage/core — the phase lists and the byte formatter (its source sent as it runs here:
 * formatBytes is kept self-contained for that). The console has no build step to import core.
 */
export const CONSOLE_SHARED_MODULE = [
  '// Served by the api from @stowage/core (services/api/src/console.plugin.ts); not a file on disk.',
  `export const BACKUP_PHASES = ${JSON.stringify(BACKUP_PHASES)};`,
  `export const ENDED_BACKUP_PHASES = ${JSON.stringify(ENDED_BACKUP_PHASES)};`,
  `export const BLOCK_STATES = ${JSON.stringify(BLOCK_STATES)};`,
  `export const PVB_PHASES = ${JSON.stringify(PVB_PHASES)};`,
  `export ${formatBytes.toString()}`,
  '',
].join('\n');

function consoleHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache');
}

/**
 * `GET /ui` (the shell) and `GET /ui/<file>` (its modules, styles, icon). Served without a token:
 * the shell holds no data and shows only a token prompt until the user gives one; every API call
 * it makes carries `Authorization: Bearer`. Only flat file names of known types are served.
 */
export const consolePlugin: FastifyPluginAsync<{ root?: string }> = async (app, opts) => {
  const root = opts.root ?? CONSOLE_ROOT;
  // Encapsulated: reply.sendFile exists only in this plugin (swagger-ui registers its own copy).
  await app.register(fastifyStatic, { root, serve: false });

  const hidden = { hide: true } as const;
  app.get('/ui', { config: { public: true }, schema: hidden }, async (_req, reply) =>
    consoleHeaders(reply).type('text/html; charset=utf-8').sendFile('index.html'),
  );
  app.get('/ui/stowage.js', { config: { public: true }, schema: hidden }, async (_req, reply) =>
    consoleHeaders(reply).type('text/javascript; charset=utf-8').send(CONSOLE_SHARED_MODULE),
  );
  app.get<{ Params: { file: string } }>('/ui/:file', { config: { public: true }, schema: hidden }, async (req, reply) => {
    const { file } = req.params;
    if (!FILE_PATTERN.test(file) || file === 'index.html') {
      return reply.callNotFound();
    }
    return consoleHeaders(reply).sendFile(file);
  });
};
