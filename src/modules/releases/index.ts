export { ASSET_OSES, type AssetInfo, type AssetKind, type AssetOs, classifyAsset } from './releases.assets';
export type { CachedRelease } from './releases.cache';
export { releasesRoutes } from './releases.routes';
export { COMPONENTS, type Component, type Release, type ReleaseAsset, ReleaseSchema } from './releases.schemas';
export { type ComponentOverview, createReleasesService, type ReleasesOptions, type ReleasesService } from './releases.service';
export type { ReleaseSource, SourceResult } from './releases.sources';
