import { startEmbeddedRedis } from '@stowage/platform';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { addBackupFlow, addBlockFlows, createFlowProducer, createQueue, QueueName, childJobOptions, JobName } from '@stowage/queue';
const server = await startEmbeddedRedis();
const redis = new Redis(server.url, { maxRetriesPerRequest: null });
const fp = createFlowProducer({ connection: redis, prefix: '{b}' });
const q = createQueue(QueueName.itemBlocks, { connection: redis, prefix: '{b}' });
const cpu = async () => Number(/used_cpu_sys:([\d.]+)/.exec(await redis.info('cpu'))![1]) + Number(/used_cpu_user:([\d.]+)/.exec(await redis.info('cpu'))![1]);
const mode = process.argv[2] ?? 'flow';
for (let round = 0; round < 4; round++) {
  const name = `bk${round}`;
  const ids = await addBackupFlow(fp, { backupName: name, backupUid: 'u' });
  const blocks = Array.from({ length: 3000 }, (_, i) => ({ id: `blk-${i}`, solo: true }));
  const r0 = await cpu(); const c0 = process.cpuUsage(); const t0 = performance.now();
  for (let s = 0; s < 3000; s += 1000) {
    if (mode === 'flow') await addBlockFlows(fp, { backupName: name, backupUid: 'u', finalizeJobId: ids.finalizeJobId, blocks: blocks.slice(s, s + 1000) });
    else await q.addBulk(blocks.slice(s, s + 1000).map((b) => ({ name: JobName.backupItemBlock, data: { backupName: name, backupUid: 'u', blockId: b.id, solo: true }, opts: { ...childJobOptions(QueueName.itemBlocks, `${name}.${b.id}`), parent: { id: ids.finalizeJobId, queue: '{b}:backups' } } })));
  }
  const c = process.cpuUsage(c0); const r = (await cpu()) - r0;
  console.log(`${mode}: ${(performance.now() - t0).toFixed(0)} ms wall, client ${((c.user + c.system) / 1000).toFixed(0)} ms cpu, redis ${(r * 1000).toFixed(0)} ms cpu, waiting ${await q.getWaitingCount()}`);
}
await fp.close(); await q.close(); await redis.quit(); await server.stop();
