import { describe, expect, test } from 'bun:test';
import { classifyAsset } from '../../../src/modules/releases';

describe('classifyAsset: the aria asset names, both eras, every OS', () => {
  const cases: Array<[Parameters<typeof classifyAsset>[0], string, ReturnType<typeof classifyAsset>]> = [
    ['engine', 'aria-engine_1.4.0_linux_x86_64.tar.gz', { kind: 'binary', version: '1.4.0', os: 'linux_x86_64' }],
    ['engine', 'aria-engine_1.4.0-rc.1_windows_x86_64.zip', { kind: 'binary', version: '1.4.0-rc.1', os: 'windows_x86_64' }],
    ['engine', 'libaria-engine_ffi_1.4.0_linux_arm64.tar.gz', { kind: 'ffi', version: '1.4.0', os: 'linux_arm64' }],
    ['engine', 'engine_0.9.0_macos.tar.gz', { kind: 'binary', version: '0.9.0', os: 'macos' }],
    ['engine', 'libaria_ffi_0.9.0_macos.tar.gz', { kind: 'ffi', version: '0.9.0', os: 'macos' }],
    ['router', 'aria-router_0.3.1_windows_x86_64.zip', { kind: 'binary', version: '0.3.1', os: 'windows_x86_64' }],
    ['router', 'libaria-router_ffi_0.3.1_macos.tar.gz', { kind: 'ffi', version: '0.3.1', os: 'macos' }],
    ['agent', 'agent-cloud_2.0.0_linux_arm64', { kind: 'binary', version: '2.0.0', os: 'linux_arm64' }],
    ['memo', 'memo_0.1.0_windows_x86_64.tar.gz', { kind: 'binary', version: '0.1.0', os: 'windows_x86_64' }],
  ];
  for (const [component, name, expected] of cases) {
    test(`${component}: ${name}`, () => expect(classifyAsset(component, name)).toEqual(expected));
  }

  const rejected: Array<[Parameters<typeof classifyAsset>[0], string]> = [
    ['engine', 'aria-engine_1.4.0_linux_x86_64.tar.gz.sha256'],
    ['engine', 'aria-engine_1.4.0_source.tar.gz'],
    ['engine', 'aria-engine-1.4.0.tar.gz'],
    ['engine', 'aria-router_1.4.0_macos.tar.gz'],
    ['engine', 'libaria-router_ffi_1.4.0_macos.tar.gz'],
    ['router', 'libaria_ffi_1.4.0_macos.tar.gz'],
    ['router', 'engine_1.4.0_macos.tar.gz'],
    ['agent', 'agent-cloud_2.0.0_linux_x86_64.sha256'],
    ['agent', 'memo_2.0.0_macos.tar.gz'],
    ['memo', 'memo_0.1.0_macos'],
    ['memo', 'agent-cloud_0.1.0_macos'],
  ];
  for (const [component, name] of rejected) {
    test(`${component} rejects ${name}`, () => expect(classifyAsset(component, name)).toBeNull());
  }
});
