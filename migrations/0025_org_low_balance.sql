ALTER TABLE "organizations" ADD COLUMN "low_balance_micros" bigint;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "low_balance_notified_at" timestamp with time zone;