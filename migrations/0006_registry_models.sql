CREATE TABLE "artifact_files" (
	"artifact_id" text NOT NULL,
	"path" text NOT NULL,
	"position" integer NOT NULL,
	"size" bigint NOT NULL,
	"crc32" bigint NOT NULL,
	"sha256" text NOT NULL,
	"object_key" text NOT NULL,
	CONSTRAINT "artifact_files_artifact_id_path_pk" PRIMARY KEY("artifact_id","path")
);
--> statement-breakpoint
CREATE TABLE "artifacts" (
	"id" text PRIMARY KEY NOT NULL,
	"slug" text NOT NULL,
	"quant" text NOT NULL,
	"sdk" text NOT NULL,
	"sdk_major" integer NOT NULL,
	"sdk_minor" integer NOT NULL,
	"kind" text NOT NULL,
	"size_bytes" bigint NOT NULL,
	"content_hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "downloads" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"key_id" text,
	"artifact_id" text NOT NULL,
	"slug" text NOT NULL,
	"quant" text NOT NULL,
	"sdk" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "models" (
	"slug" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"family" text NOT NULL,
	"description" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "artifact_files" ADD CONSTRAINT "artifact_files_artifact_id_artifacts_id_fk" FOREIGN KEY ("artifact_id") REFERENCES "public"."artifacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "artifacts" ADD CONSTRAINT "artifacts_slug_models_slug_fk" FOREIGN KEY ("slug") REFERENCES "public"."models"("slug") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "artifact_files_object_idx" ON "artifact_files" USING btree ("object_key");--> statement-breakpoint
CREATE UNIQUE INDEX "artifacts_triple_key" ON "artifacts" USING btree ("slug","quant","sdk");--> statement-breakpoint
CREATE INDEX "downloads_user_idx" ON "downloads" USING btree ("user_id","created_at");