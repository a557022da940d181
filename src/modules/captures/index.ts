export { createCapturesService, type CapturesService } from './captures.service';
export { capturesRoutes } from './captures.routes';
export { StreamAnswer } from './captures.answer';
export type { CaptureRecord } from './captures.writer';
