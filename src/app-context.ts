import type { Config } from './config';
import type { PlatformContext } from './platform/context';

/** What every module's service factory may use: the platform's context over the site's whole Config. */
export type AppContext = PlatformContext<Config>;
