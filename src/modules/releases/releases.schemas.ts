/**
 * The release object we answer ({tag_name, name, prerelease, published_at, assets}) and the two upstream shapes it is read from. TypeBox
 * schemas drive both the route documentation and the validation of what an upstream sends.
 */
import { type Static, t } from 'elysia';
import type { Component } from '../../config';

export type { Component };
export const COMPONENTS: readonly Component[] = ['engine', 'router', 'agent', 'memo'];

export const ReleaseAssetSchema = t.Object({
  name: t.String({ description: 'file name' }),
  url: t.String({ description: 'direct download URL' }),
  size: t.Integer({ minimum: 0, description: 'bytes' }),
  content_type: t.String({ description: 'MIME type' }),
  digest: t.Optional(t.String({ description: 'e.g. sha256:<hex>, when the source publishes one' })),
});

export const ReleaseSchema = t.Object({
  tag_name: t.String(),
  name: t.String(),
  prerelease: t.Boolean(),
  published_at: t.String({ description: 'ISO 8601 UTC' }),
  assets: t.Array(ReleaseAssetSchema),
});

export type ReleaseAsset = Static<typeof ReleaseAssetSchema>;
export type Release = Static<typeof ReleaseSchema>;

// What both upstream shapes share; GitHub and mirrors may give null for `name` and `digest`.
const upstreamAsset = {
  name: t.String({ minLength: 1 }),
  size: t.Integer({ minimum: 0 }),
  content_type: t.String(),
  digest: t.Optional(t.Union([t.String(), t.Null()])),
};
const upstreamRelease = { tag_name: t.String({ minLength: 1 }), prerelease: t.Boolean(), published_at: t.String() };

/** The fields we read from GitHub's REST release object. */
export const GitHubReleaseSchema = t.Object({
  ...upstreamRelease,
  name: t.Union([t.String(), t.Null()]),
  assets: t.Array(t.Object({ ...upstreamAsset, browser_download_url: t.String() })),
});

/** A mirror's `{component}/latest.json` (or `{tag}.json`): the release shape itself. */
export const MirrorReleaseSchema = t.Object({
  ...upstreamRelease,
  name: t.Optional(t.Union([t.String(), t.Null()])),
  assets: t.Array(t.Object({ ...upstreamAsset, url: t.String() })),
});
