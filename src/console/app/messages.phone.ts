/** Strings of phone code sign-in and sign-up in both languages; merged into messages.ts. */

export const en = {};

export const zh: Record<keyof typeof en, string> = {};
