/** Release fixtures shared by the releases tests: one release per component with every asset kind. */
import type { FakeAsset, FakeRelease } from '../../support/fake-github';

const OSES = ['linux_x86_64', 'linux_arm64', 'macos', 'windows_x86_64'];

export const ENGINE_WANTED = OSES.flatMap((os) => [
  `aria-engine_1.4.0_${os}.${os.startsWith('windows') ? 'zip' : 'tar.gz'}`,
  `libaria-engine_ffi_1.4.0_${os}.tar.gz`,
]);

/** Files that must never appear in the engine's list. */
export const ENGINE_UNWANTED = [
  'aria-engine_1.4.0_linux_x86_64.tar.gz.sha256',
  'SHA256SUMS',
  'aria-engine_1.4.0_source.tar.gz',
  'Source code (tar.gz)',
  'aria-router_1.4.0_linux_x86_64.tar.gz',
  'libaria-router_ffi_1.4.0_linux_x86_64.tar.gz',
  'memo_1.4.0_linux_x86_64.tar.gz',
  'aria-engine_1.4.0_freebsd_x86_64.tar.gz',
];

export const asset = (name: string): FakeAsset => ({ name, content_type: 'application/gzip', size: 1000 + name.length });

export const engineRelease = (): FakeRelease => ({
  tag_name: 'v1.4.0',
  name: 'Engine 1.4.0',
  published_at: '2026-03-01T10:00:00Z',
  assets: [...ENGINE_WANTED, ...ENGINE_UNWANTED].map(asset),
});

export const routerRelease = (): FakeRelease => ({
  tag_name: 'v0.3.1',
  name: null, // untitled on GitHub: the tag stands in
  prerelease: true,
  published_at: '2026-02-01T08:30:00Z',
  assets: [
    ...OSES.flatMap((os) => [`aria-router_0.3.1_${os}.tar.gz`, `libaria-router_ffi_0.3.1_${os}.tar.gz`]),
    'aria-engine_0.3.1_linux_x86_64.tar.gz',
    'aria-router_0.3.1_linux_x86_64.tar.gz.sha256',
  ].map(asset),
});

export const agentRelease = (): FakeRelease => ({
  tag_name: 'v2.0.0',
  name: 'Agent 2',
  published_at: '2026-01-15T00:00:00Z',
  assets: [
    ...OSES.map((os) => `agent-cloud_2.0.0_${os}${os.startsWith('windows') ? '.exe' : ''}`),
    'agent-cloud_2.0.0_checksums.txt',
    'memo_2.0.0_macos.tar.gz',
  ].map(asset),
});

export const memoRelease = (): FakeRelease => ({
  tag_name: 'v0.1.0',
  name: 'Memo 0.1',
  published_at: '2026-01-20T00:00:00Z',
  assets: [...OSES.map((os) => `memo_0.1.0_${os}.tar.gz`), 'agent-cloud_0.1.0_macos', 'memo_0.1.0_macos.tar.gz.sig'].map(asset),
});

export const allRepos = () => ({
  'ariacompute/engine': { latest: engineRelease() },
  'ariacompute/router': { latest: routerRelease() },
  'ariacompute/agent': { latest: agentRelease() },
  'ariacompute/memo': { latest: memoRelease() },
});
