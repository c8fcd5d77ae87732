/** `bytes` of log-like text (compressible, unlike random bytes); `seed` makes files differ. */
export function logText(bytes: number, seed: number): Buffer {
  const lines: string[] = [];
  for (let n = 0, size = 0; size < bytes; n++) {
    const line = `2026-12-04T09:${n % 60} INFO request ${seed}.${n} served in ${(n * 13) % 997} ms\n`;
    lines.push(line);
    size += line.length;
  }
  return Buffer.from(lines.join('')).subarray(0, bytes);
}
