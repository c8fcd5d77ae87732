export { getFreePort } from '@stowage/platform';
export { type RedisServer, type RedisServerOptions, startRedisServer, uniquePrefix, useTestRedis } from './redis-server.js';
export { type DescribedEntry, describeTree, writeVolumeTree } from './volume-tree.js';
export { spawnWorker, type WorkerProcess } from './worker-process.js';
