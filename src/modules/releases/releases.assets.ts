/**
 * Which release assets belong to which component (the aria projects' release asset names). Names are
 * `<prefix>_<ver>_<os>.<ext>`; `<ver>` is any version without underscores (not checked against
 * the tag, so a tag like `engine-v1.2` still matches). Both naming eras of the engine match.
 * Checksums (`….sha256`), source archives and other components' files match no pattern.
 */
import type { Component, ReleaseAsset } from './releases.schemas';

export const ASSET_OSES = ['linux_x86_64', 'linux_arm64', 'macos', 'windows_x86_64'] as const;
export type AssetOs = (typeof ASSET_OSES)[number];
export type AssetKind = 'binary' | 'ffi';

const OS = `(${ASSET_OSES.join('|')})`;
const VER = '([^_/]+)';
const ARCHIVE = '\\.(?:tar\\.gz|zip)';

function pattern(prefixes: string, ext: string): RegExp {
  return new RegExp(`^(?:${prefixes})_${VER}_${OS}${ext}$`);
}

const PATTERNS: Record<Component, Array<[AssetKind, RegExp]>> = {
  engine: [
    ['binary', pattern('aria-engine|engine', ARCHIVE)],
    ['ffi', pattern('libaria-engine_ffi|libaria_ffi', ARCHIVE)],
  ],
  router: [
    ['binary', pattern('aria-router', ARCHIVE)],
    ['ffi', pattern('libaria-router_ffi', ARCHIVE)],
  ],
  agent: [['binary', pattern('agent-cloud', '(?:\\.exe)?')]],
  memo: [['binary', pattern('memo', ARCHIVE)]],
};

export interface AssetInfo {
  kind: AssetKind;
  version: string;
  os: AssetOs;
}

/**
 * What an asset file is for a component, or null when it is not one of its assets.
 * Example: classifyAsset('engine', 'libaria_ffi_0.9.0_macos.tar.gz') → {kind: 'ffi', version: '0.9.0', os: 'macos'}.
 */
export function classifyAsset(component: Component, fileName: string): AssetInfo | null {
  for (const [kind, re] of PATTERNS[component]) {
    const m = re.exec(fileName);
    if (m) return { kind, version: m[1]!, os: m[2] as AssetOs };
  }
  return null;
}

export function componentAssets(component: Component, assets: ReleaseAsset[]): ReleaseAsset[] {
  return assets.filter((a) => classifyAsset(component, a.name) !== null);
}
