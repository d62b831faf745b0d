"""Pure metric code, no Django: SQuAD text normalization and matching (`text_match`) and the
statistics that compare automatic metrics with human judgments (`meta_evaluation`)."""
