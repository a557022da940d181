export { createRegistryService, type Artifact, type ArtifactFile, type RegistryService } from './registry.service';
export { createDownloads, type Downloads } from './registry.download';
export { publishArtifact, validatePublishInput, type PublishInput, type PublishProgress } from './registry.publish';
export { registryRoutes } from './registry.routes';
export { registryPages } from './registry.pages';
export { QUANTS, type ModelRecord, type Quant } from './registry.schemas';
