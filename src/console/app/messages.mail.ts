/** Strings of the mail pages (verify, forgot and reset password, notifications) in both languages; merged into messages.ts. */

export const en = {};

export const zh: Record<keyof typeof en, string> = {};
