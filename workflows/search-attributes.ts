import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Typed keys of the custom search attributes infra/temporal.ts registers (names must match). */
export const TraceStage = defineSearchAttributeKey('TraceStage', SearchAttributeType.KEYWORD);
export const TraceEnv = defineSearchAttributeKey('TraceEnv', SearchAttributeType.KEYWORD);
export const TracePassRate = defineSearchAttributeKey('TracePassRate', SearchAttributeType.DOUBLE);
export const TraceCapabilities = defineSearchAttributeKey('TraceCapabilities', SearchAttributeType.KEYWORD_LIST);
export const TraceBasePassRate = defineSearchAttributeKey('TraceBasePassRate', SearchAttributeType.DOUBLE);
export const TraceFinalPassRate = defineSearchAttributeKey('TraceFinalPassRate', SearchAttributeType.DOUBLE);
export const TracePromotion = defineSearchAttributeKey('TracePromotion', SearchAttributeType.KEYWORD);
