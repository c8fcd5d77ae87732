'use strict';
// Runs @20minutes/s3rver (an S3-protocol server written in JS, objects kept as files in a
// directory) for startS3Server. Args: <dir> <bucket> [port]. Prints one JSON line
// {"port": n} once it listens; exits when stdin closes (its parent died or stopped it).
const S3rver = require('@20minutes/s3rver');

const [dir, bucket, port] = process.argv.slice(2);
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port ?? 0),
  silent: true,
  directory: dir,
  vhostBuckets: false,
  // s3rver computes the canonical query of a ListObjectsV2 with a '/' in its prefix differently
  // from the SDK (SignatureDoesNotMatch); it still refuses unknown access key ids.
  allowMismatchedSignatures: true,
  configureBuckets: bucket ? [{ name: bucket, configs: [] }] : [],
});
server.run().then(
  (address) => process.stdout.write(`${JSON.stringify({ port: address.port })}\n`),
  (err) => {
    process.stderr.write(`s3 server failed to start: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
