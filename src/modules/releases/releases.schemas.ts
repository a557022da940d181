/**
 * The release object (SPEC "Release") and the two upstream shapes it is read from. TypeBox
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

/** The fields we read from GitHub's REST release object (name and digest may be null there). */
export const GitHubReleaseSchema = t.Object({
  tag_name: t.String({ minLength: 1 }),
  name: t.Union([t.String(), t.Null()]),
  prerelease: t.Boolean(),
  published_at: t.String(),
  assets: t.Array(
    t.Object({
      name: t.String({ minLength: 1 }),
      browser_download_url: t.String(),
      size: t.Integer({ minimum: 0 }),
      content_type: t.String(),
      digest: t.Optional(t.Union([t.String(), t.Null()])),
    }),
  ),
});

/** A mirror's `{component}/latest.json`: the release shape itself, tolerant of null name/digest. */
export const MirrorReleaseSchema = t.Object({
  tag_name: t.String({ minLength: 1 }),
  name: t.Optional(t.Union([t.String(), t.Null()])),
  prerelease: t.Boolean(),
  published_at: t.String(),
  assets: t.Array(
    t.Object({
      name: t.String({ minLength: 1 }),
      url: t.String(),
      size: t.Integer({ minimum: 0 }),
      content_type: t.String(),
      digest: t.Optional(t.Union([t.String(), t.Null()])),
    }),
  ),
});
