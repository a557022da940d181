/** Strings of the router breaker on the admin health page, in both languages; merged into messages.ts. */

export const en = {
  'breaker.column': 'Breaker',
  'breaker.closed': 'Closed ({failures}/{attempts} failed)',
  'breaker.open': 'Open until {time}',
  'breaker.halfOpen': 'Half-open (probing)',
  'breaker.off': 'Off',
  'breaker.note': 'Each server process keeps its own breakers: this shows the process that answered.',
};

export const zh: Record<keyof typeof en, string> = {
  'breaker.column': '熔断器',
  'breaker.closed': '闭合（{attempts} 次中失败 {failures} 次）',
  'breaker.open': '断开，直到 {time}',
  'breaker.halfOpen': '半开（试探中）',
  'breaker.off': '未启用',
  'breaker.note': '每个服务进程各有自己的熔断器：此处显示的是应答本页的进程。',
};
