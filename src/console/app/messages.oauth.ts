/** Strings of sign-in with providers and linked identities in both languages; merged into messages.ts. */

export const en = {};

export const zh: Record<keyof typeof en, string> = {};
