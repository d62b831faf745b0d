"""LERC, the learned QA-evaluation metric (Chen et al. 2020, MOCHA), as plain PyTorch code.

Nothing in this package imports Django: `train(cfg, train_examples, val_examples) -> metrics`
runs in a notebook, a script or a Celery worker alike. `metrics_app.services.lerc` turns the
platform's judgments into examples and model versions; `metrics_app.metrics.learned` serves it.

Read in this order (each module imports only those above it):

    config.py      TrainConfig (parsed once at the edge), the model kinds, TrainingCancelled
    validation.py  the validation metric of each kind and which value is better (no torch)
    data.py        examples, tokenization with passage-only truncation, training inputs per kind
    device.py      pick_device, bf16 autocast, scoring precision, seeds
    batching.py    tensors: dynamic padding, length-bucketed training batches
    model.py       the nn.Modules, one class per kind (MODEL_KINDS), and their save format
    inference.py   batched scoring, validation numbers, LercScorer (+ calibration.py)
    training.py    train() and pretrain_backbone(): the loop, checkpoints, resume, calibration
"""
