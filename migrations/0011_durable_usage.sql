CREATE TABLE "wallet_grants" (
	"user_id" text NOT NULL,
	"holder" text NOT NULL,
	"amount_micros" bigint NOT NULL,
	"margin" boolean NOT NULL,
	"version" bigint NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "wallet_grants_user_id_holder_pk" PRIMARY KEY("user_id","holder")
);
--> statement-breakpoint
CREATE TABLE "router_usage_set_aside" (
	"id" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"user_id" text,
	"row" jsonb NOT NULL,
	"reason" text NOT NULL
);
--> statement-breakpoint
CREATE INDEX "wallet_grants_holder_idx" ON "wallet_grants" USING btree ("holder");