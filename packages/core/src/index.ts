export * from './hash.js';
export * from './names.js';
