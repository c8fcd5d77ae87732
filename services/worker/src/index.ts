export { startWorkerService, type WorkerService, type WorkerServiceOptions } from './worker-service.js';
