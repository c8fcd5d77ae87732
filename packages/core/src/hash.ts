// FNV-1a 64-bit, written out so core stays portable (no node:crypto) and fast enough to name
// 300k items in well under a second: the 64-bit state is kept in four 16-bit words so every
// step is exact in double-precision arithmetic (no BigInt in the hot loop). The scratch buffer
// is module state but holds nothing between calls (core is synchronous). Used for short,
// deterministic name suffixes, not for security.

let scratch = new Uint8Array(256);

/** UTF-8 bytes of `text` into the shared scratch buffer; returns the byte count. */
function encodeUtf8(text: string): number {
  if (scratch.length < text.length * 4) scratch = new Uint8Array(text.length * 4);
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    let code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    if (code < 0x80) {
      scratch[length++] = code;
    } else if (code < 0x800) {
      scratch[length++] = 0xc0 | (code >> 6);
      scratch[length++] = 0x80 | (code & 0x3f);
    } else if (code < 0x10000) {
      scratch[length++] = 0xe0 | (code >> 12);
      scratch[length++] = 0x80 | ((code >> 6) & 0x3f);
      scratch[length++] = 0x80 | (code & 0x3f);
    } else {
      scratch[length++] = 0xf0 | (code >> 18);
      scratch[length++] = 0x80 | ((code >> 12) & 0x3f);
      scratch[length++] = 0x80 | ((code >> 6) & 0x3f);
      scratch[length++] = 0x80 | (code & 0x3f);
    }
  }
  return length;
}

/** FNV-1a 64 of the UTF-8 bytes of `text`, as 16 lowercase hex digits. */
export function fnv1a64Hex(text: string): string {
  const length = encodeUtf8(text);
  // offset basis 0xcbf29ce484222325, low word first
  let w0 = 0x2325;
  let w1 = 0x8422;
  let w2 = 0x9ce4;
  let w3 = 0xcbf2;
  for (let i = 0; i < length; i++) {
    w0 ^= scratch[i] as number;
    // multiply by the FNV prime 0x100000001b3 = 2^40 + 0x1b3, carrying between 16-bit words
    const t0 = w0 * 0x1b3;
    const t1 = w1 * 0x1b3 + (t0 >>> 16);
    const t2 = w2 * 0x1b3 + (w0 << 8) + (t1 >>> 16);
    w3 = (w3 * 0x1b3 + (w1 << 8) + (t2 >>> 16)) & 0xffff;
    w0 = t0 & 0xffff;
    w1 = t1 & 0xffff;
    w2 = t2 & 0xffff;
  }
  // one string from 16 char codes: formatting word by word made 8 short-lived strings per hash
  return String.fromCharCode(
    hexDigit(w3 >> 12),
    hexDigit((w3 >> 8) & 15),
    hexDigit((w3 >> 4) & 15),
    hexDigit(w3 & 15),
    hexDigit(w2 >> 12),
    hexDigit((w2 >> 8) & 15),
    hexDigit((w2 >> 4) & 15),
    hexDigit(w2 & 15),
    hexDigit(w1 >> 12),
    hexDigit((w1 >> 8) & 15),
    hexDigit((w1 >> 4) & 15),
    hexDigit(w1 & 15),
    hexDigit(w0 >> 12),
    hexDigit((w0 >> 8) & 15),
    hexDigit((w0 >> 4) & 15),
    hexDigit(w0 & 15),
  );
}

/** Char code of one lowercase hex digit. */
function hexDigit(nibble: number): number {
  return nibble < 10 ? 48 + nibble : 87 + nibble;
}

/** Hash of several parts; a NUL separator keeps `('ab','c')` and `('a','bc')` apart. */
export function hashParts(...parts: readonly string[]): string {
  return fnv1a64Hex(parts.join('\u0000'));
}
