CREATE TABLE "key_spend_grants" (
	"key_id" text NOT NULL,
	"holder" text NOT NULL,
	"period_start" timestamp with time zone NOT NULL,
	"amount_micros" bigint NOT NULL,
	"margin" boolean NOT NULL,
	"version" bigint NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "key_spend_grants_key_id_holder_pk" PRIMARY KEY("key_id","holder")
);
--> statement-breakpoint
DROP TABLE "router_key_holds" CASCADE;--> statement-breakpoint
CREATE INDEX "key_spend_grants_holder_idx" ON "key_spend_grants" USING btree ("holder");