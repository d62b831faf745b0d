"""Pure metric code, no Django: the statistics that compare automatic metrics with human
judgments (`meta_evaluation`). SQuAD text normalization and matching is
`core.text_match`, which the annotation app's send filter reads too."""
