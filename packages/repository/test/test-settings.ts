/** Chunker and pack settings for repository tests; the volume tree itself is @stowage/testing's. */

/** Chunk sizes small enough that a few MB of test data spans dozens of chunks. */
export const TEST_CHUNKER = { minBytes: 16 * 1024, avgBytes: 64 * 1024, maxBytes: 256 * 1024 };
/** Chunks up to 32 KiB are packed, larger ones loose: tests exercise both stores. */
export const TEST_PACK_BLOB_MAX = 32 * 1024;
