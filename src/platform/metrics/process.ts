/**
 * prom-client's process and runtime collectors, registered one by one: all of its defaults but
 * nodejs_heap_space_size_*. Under Bun, v8.getHeapSpaceStatistics() walks the whole heap on the
 * event loop (63–68 ms with 3 M objects, 10–23 ms per scrape of a server under load), and
 * JavaScriptCore has no V8 heap spaces to report; nodejs_heap_size_* (process.memoryUsage(),
 * microseconds) still tell the heap's size.
 */
import eventLoopLag from 'prom-client/lib/metrics/eventLoopLag';
import gc from 'prom-client/lib/metrics/gc';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal';
import processHandles from 'prom-client/lib/metrics/processHandles';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors';
import processRequests from 'prom-client/lib/metrics/processRequests';
import processResources from 'prom-client/lib/metrics/processResources';
import processStartTime from 'prom-client/lib/metrics/processStartTime';
import version from 'prom-client/lib/metrics/version';
import type { Registry } from 'prom-client';

/** In prom-client's order, so /metrics lists them as before. */
const COLLECTORS = [processCpuTotal, processStartTime, osMemoryHeap, processOpenFileDescriptors, processMaxFileDescriptors, eventLoopLag, processResources, processHandles, processRequests, heapSizeAndUsed, version, gc];

/** Adds the process and runtime metrics to `registry`; the event loop's lag sampled every `eventLoopSampleMs`. */
export function registerProcessMetrics(registry: Registry, eventLoopSampleMs: number): void {
  for (const collect of COLLECTORS) collect(registry, { eventLoopMonitoringPrecision: eventLoopSampleMs });
}
