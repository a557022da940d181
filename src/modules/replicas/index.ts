/** Which replicas of the site are running: the count every rate limit is shared by. */
export { createMembership, HEARTBEAT_MS, joinMembership, LIVE_AFTER_MS, type Membership } from './replicas.membership';
