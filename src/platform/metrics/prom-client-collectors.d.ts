/** prom-client's collectors (lib/metrics/*.js), which its own typings do not declare. */
declare module 'prom-client/lib/metrics/*' {
  import type { Registry } from 'prom-client';
  const collect: (registry: Registry, config: { eventLoopMonitoringPrecision: number }) => void;
  export default collect;
}
