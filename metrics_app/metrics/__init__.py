"""The automatic metrics the registry (`metrics_app.registry`) serves: the baselines
(`baselines`: EM, F1, BLEU, ROUGE, METEOR, BERTScore, ...) and the learned metric LERC as it is
served from its promoted model version (`learned`). Each module registers its metrics on import."""
