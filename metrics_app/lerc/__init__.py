"""LERC, the learned QA-evaluation metric (Chen et al. 2020, MOCHA), as plain PyTorch code.

Nothing in this package imports Django: `train(cfg, train_examples, val_examples) -> metrics`
runs in a notebook, a script or a Celery worker alike. `metrics_app.services.lerc` turns the
platform's judgments into examples and model versions; `metrics_app.metrics.learned` serves it.

    model.py  the nn.Modules (BERT-like encoder + linear head on [CLS]) and their save format
    data.py   examples, tokenization with passage-only truncation, length-sorted batching
    train.py  TrainConfig and train(): AdamW, warmup/decay, best epoch by validation metric
    infer.py  LercScorer: batched scoring under torch.inference_mode
"""
