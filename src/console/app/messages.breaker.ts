/** Strings of the router breaker on the admin health page, in both languages; merged into messages.ts. */

export const en = {
  'breaker.column': 'Breaker',
  'breaker.closed': 'Closed ({failures}/{attempts} failed)',
  'breaker.open': 'Open until {time}',
  'breaker.halfOpen': 'Half-open (probing)',
  'breaker.off': 'Off',
  'breaker.note': 'Each server process keeps its own breakers: this shows the process that answered.',
  // Details of a router.breaker audit entry.
  'product.audit.model': 'Model',
  'product.audit.backend': 'Backend',
  'product.audit.replica': 'Server process',
  'product.audit.attempts': 'Attempts in the window',
  'product.audit.failures': 'Failures in the window',
  'product.audit.probe_at': 'Probe from',
  'product.audit.via': 'By',
};

export const zh: Record<keyof typeof en, string> = {
  'breaker.column': '熔断器',
  'breaker.closed': '闭合（{attempts} 次中失败 {failures} 次）',
  'breaker.open': '断开，直到 {time}',
  'breaker.halfOpen': '半开（试探中）',
  'breaker.off': '未启用',
  'breaker.note': '每个服务进程各有自己的熔断器：此处显示的是应答本页的进程。',
  'product.audit.model': '模型',
  'product.audit.backend': '后端',
  'product.audit.replica': '服务进程',
  'product.audit.attempts': '窗口内请求数',
  'product.audit.failures': '窗口内失败数',
  'product.audit.probe_at': '试探时间',
  'product.audit.via': '操作方',
};
