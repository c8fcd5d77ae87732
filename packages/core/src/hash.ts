// FNV-1a 64-bit, written out so core stays portable (no node:crypto) and fast enough to name
// 300k items in well under a second: the 64-bit state is kept in four 16-bit words so every
// step is exact in double-precision arithmetic (no BigInt in the hot loop). Used for short,
// deterministic name suffixes, not for security.

/** FNV-1a 64 of the UTF-8 bytes of `text`, as 16 lowercase hex digits. */
export function fnv1a64Hex(text: string): string {
  // offset basis 0xcbf29ce484222325, low word first
  let w0 = 0x2325;
  let w1 = 0x8422;
  let w2 = 0x9ce4;
  let w3 = 0xcbf2;
  const mix = (byte: number): void => {
    w0 ^= byte;
    // multiply by the FNV prime 0x100000001b3 = 2^40 + 0x1b3
    const t0 = w0 * 0x1b3;
    const t1 = w1 * 0x1b3;
    let t2 = w2 * 0x1b3 + (w0 << 8);
    const t3 = w3 * 0x1b3 + (w1 << 8);
    const c1 = t1 + (t0 >>> 16);
    w0 = t0 & 0xffff;
    t2 += c1 >>> 16;
    w1 = c1 & 0xffff;
    w3 = (t3 + (t2 >>> 16)) & 0xffff;
    w2 = t2 & 0xffff;
  };
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i);
    // inline UTF-8 encoding, so non-ASCII names hash like their bytes would
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    if (code < 0x80) {
      mix(code);
    } else if (code < 0x800) {
      mix(0xc0 | (code >> 6));
      mix(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      mix(0xe0 | (code >> 12));
      mix(0x80 | ((code >> 6) & 0x3f));
      mix(0x80 | (code & 0x3f));
    } else {
      mix(0xf0 | (code >> 18));
      mix(0x80 | ((code >> 12) & 0x3f));
      mix(0x80 | ((code >> 6) & 0x3f));
      mix(0x80 | (code & 0x3f));
    }
  }
  const hex = (word: number): string => word.toString(16).padStart(4, '0');
  return hex(w3) + hex(w2) + hex(w1) + hex(w0);
}

/** Hash of several parts; a NUL separator keeps `('ab','c')` and `('a','bc')` apart. */
export function hashParts(...parts: readonly string[]): string {
  return fnv1a64Hex(parts.join('\u0000'));
}
