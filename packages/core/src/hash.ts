// FNV-1a 64-bit, written out so core stays portable (no node:crypto). It is used for
// deterministic, short name suffixes, not for security.
const FNV_OFFSET_BASIS_64 = 0xcbf29ce484222325n;
const FNV_PRIME_64 = 0x100000001b3n;
const MASK_64 = 0xffffffffffffffffn;

const utf8 = new TextEncoder();

/** FNV-1a 64 of the UTF-8 bytes of `text`, as 16 lowercase hex digits. */
export function fnv1a64Hex(text: string): string {
  let hash = FNV_OFFSET_BASIS_64;
  for (const byte of utf8.encode(text)) {
    hash ^= BigInt(byte);
    hash = (hash * FNV_PRIME_64) & MASK_64;
  }
  return hash.toString(16).padStart(16, '0');
}

/** Hash of several parts; a NUL separator keeps `('ab','c')` and `('a','bc')` apart. */
export function hashParts(...parts: readonly string[]): string {
  return fnv1a64Hex(parts.join('\u0000'));
}
