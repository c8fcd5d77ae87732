export { getFreePort } from './free-port.js';
export { type RedisServer, type RedisServerOptions, startRedisServer, uniquePrefix, useTestRedis } from './redis-server.js';
