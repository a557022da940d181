/**
 * Names that depend on the host: the `<os>` token of release assets and the FFI library and binary
 * file names, as the aria projects name their release assets.
 */
export type RuntimeComponent = 'engine' | 'router';
export type OsTag = 'linux_x86_64' | 'linux_arm64' | 'macos' | 'windows_x86_64';

/** This host's asset token, or null when the releases publish nothing for it. */
export function hostOsTag(platform: string = process.platform, arch: string = process.arch): OsTag | null {
  if (platform === 'linux' && arch === 'x64') return 'linux_x86_64';
  if (platform === 'linux' && arch === 'arm64') return 'linux_arm64';
  if (platform === 'darwin') return 'macos';
  if (platform === 'win32' && arch === 'x64') return 'windows_x86_64';
  return null;
}

const LIBRARY_STEM: Record<RuntimeComponent, string> = { engine: 'aria_ffi', router: 'aria-router_ffi' };

/** libaria_ffi.so / libaria_ffi.dylib / aria_ffi.dll (and the router's). */
export function libraryFileName(component: RuntimeComponent, platform: string = process.platform): string {
  const stem = LIBRARY_STEM[component];
  if (platform === 'win32') return `${stem}.dll`;
  return `lib${stem}.${platform === 'darwin' ? 'dylib' : 'so'}`;
}

export function binaryFileName(component: RuntimeComponent, platform: string = process.platform): string {
  return `aria-${component}${platform === 'win32' ? '.exe' : ''}`;
}
