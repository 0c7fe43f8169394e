"""What `tune` shows beside each trial: the corrected prediction on the model's scale."""

import numpy as np

from rooftune.tuner.search.strategies import shown_us


def test_shown_predictions_keep_the_models_scale_and_the_residuals_order():
    log_model = np.log([100.0, 200.0, 400.0])
    correction = np.array([1.5, 0.9, 1.0])  # a residual whose shape-wide level (~3x) means nothing
    shown = shown_us(log_model, correction)
    np.testing.assert_allclose(np.log(shown).mean(), log_model.mean())
    assert list(np.argsort(shown)) == list(np.argsort(log_model + correction))
