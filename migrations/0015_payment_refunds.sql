CREATE TABLE "payment_refunds" (
	"id" text PRIMARY KEY NOT NULL,
	"payment_id" text NOT NULL,
	"user_id" text NOT NULL,
	"provider" text NOT NULL,
	"kind" text NOT NULL,
	"source" text NOT NULL,
	"amount_micros" bigint NOT NULL,
	"status" text NOT NULL,
	"provider_refund_id" text,
	"reason" text,
	"failure" text,
	"idempotency_key" text,
	"request_hash" text,
	"created_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"checked_at" timestamp with time zone,
	CONSTRAINT "payment_refunds_kind_check" CHECK ("payment_refunds"."kind" in ('refund', 'dispute')),
	CONSTRAINT "payment_refunds_source_check" CHECK ("payment_refunds"."source" in ('admin', 'provider')),
	CONSTRAINT "payment_refunds_status_check" CHECK ("payment_refunds"."status" in ('pending', 'succeeded', 'failed', 'open', 'won', 'lost')),
	CONSTRAINT "payment_refunds_amount_check" CHECK ("payment_refunds"."amount_micros" > 0)
);
--> statement-breakpoint
ALTER TABLE "payments" ADD COLUMN "refunded_amount_micros" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "payment_refunds_provider_refund_key" ON "payment_refunds" USING btree ("provider","provider_refund_id");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_refunds_idempotency_key" ON "payment_refunds" USING btree ("payment_id","idempotency_key");--> statement-breakpoint
CREATE INDEX "payment_refunds_payment_idx" ON "payment_refunds" USING btree ("payment_id","created_at");--> statement-breakpoint
CREATE INDEX "payment_refunds_pending_idx" ON "payment_refunds" USING btree ("created_at") WHERE "payment_refunds"."status" = 'pending';