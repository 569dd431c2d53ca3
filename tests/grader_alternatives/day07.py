"""Day 07 · Week 1 review: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # ------------------------------------------------------------------ Quiz, part 1
    Alternative(
        cell="day07_quiz_part1",
        why="numbers written as ints and computed, letters in upper case or with spaces",
        source='''Q1 = int("2")
Q2 = "B"
Q3 = 2 * 1000**3
Q4 = " b"
Q5 = "B"
'''),
    Alternative(
        cell="day07_quiz_part1",
        why="the FLOP count checked with a line of code (FlopCounterMode), as the quiz allows; a float GPU index",
        source='''from torch.utils.flop_counter import FlopCounterMode

Q1 = 2.0
Q2 = "b"
with FlopCounterMode(display=False) as flops:
    torch.randn(1000, 1000) @ torch.randn(1000, 1000)
Q3 = flops.get_total_flops()
Q4 = "b"
Q5 = "b"
'''),
    # ------------------------------------------------------------------ Quiz, part 2
    Alternative(
        cell="day07_quiz_part2",
        why="the parameter count computed from torchvision and the epoch accuracy rounded to 3 decimals",
        source='''import torchvision

Q6 = sum(p.numel() for p in torchvision.models.resnet50().parameters()) / 1e6
Q7 = "B"
Q8 = "c"
Q9 = round((0.5 * 32 + 0.5 * 32 + 1.0 * 6) / 70, 3)
Q10 = "A"
Q11 = "b "
'''),
    Alternative(
        cell="day07_quiz_part2",
        why="integers where they are exact, the accuracy as correct / samples",
        source='''Q6 = 25.6
Q7 = "b"
Q8 = "C"
correct = 16 + 16 + 6
Q9 = correct / (32 + 32 + 6)
Q10 = "a"
Q11 = "B"
'''),
]

ALTERNATIVES += [
    # ------------------------------------------------------------------ Project: 96 % within one epoch
    Alternative(
        cell="day07_project",
        why="tunes the schedule instead of recalibrating: batches of 16 and a cosine decay per step, so the weights "
            "settle before the epoch ends and BatchNorm's running averages catch up",
        source='''seed_everything(SEED)
project_model = small_cnn(data.num_classes, image_size=IMAGE_SIZE).to(device)
small_batches, _, _ = data.loaders(16, seed=SEED)
optimizer = torch.optim.AdamW(project_model.parameters(), lr=LR)
cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * len(small_batches))
history = fit(project_model, small_batches, val_loader, optimizer, device, EPOCHS, scheduler=cosine,
              scheduler_per_step=True, progress=False)
final_val_accuracy = float(history.last["val_accuracy"])
print(f"final validation accuracy: {final_val_accuracy:.2%} (target {TARGET:.0%})")
'''),
    Alternative(
        cell="day07_project",
        why="a hand-written loop (Day 06), batches of 16, BatchNorm statistics recomputed by hand (reset, cumulative "
            "average, one pass over the training split without autograd), a list of dicts as history",
        source='''seed_everything(SEED)
project_model = small_cnn(data.num_classes, image_size=IMAGE_SIZE).to(device)
optimizer = torch.optim.AdamW(project_model.parameters(), lr=LR)
loader16, _, _ = data.loaders(16, seed=SEED)
history = []
for epoch in range(EPOCHS):
    project_model.train()
    for images, targets in loader16:
        images, targets = images.to(device), targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(project_model(images), targets).backward()
        optimizer.step()
    history.append({"epoch": epoch + 1, "val_accuracy": evaluate(project_model, val_loader, device).accuracy})

# BatchNorm's running averages lag the weights after so few steps: recompute them with the final weights.
norms = [m for m in project_model.modules() if isinstance(m, nn.BatchNorm2d)]
for m in norms:
    m.reset_running_stats()
    m.momentum = None                      # cumulative average over every batch below
project_model.train()
with torch.no_grad():
    for images, _ in loader16:
        project_model(images.to(device))
for m in norms:
    m.momentum = 0.1
project_model.eval()
final_val_accuracy = evaluate(project_model, val_loader, device).accuracy
print(f"final validation accuracy: {final_val_accuracy:.2%} (target {TARGET:.0%})")
'''),
    Alternative(
        cell="day07_project",
        why="Adam instead of AdamW, then update_bn, and the accuracy counted by hand in eval mode under no_grad",
        source='''from torch.optim.swa_utils import update_bn

seed_everything(SEED)
fresh_train, fresh_val, _ = data.loaders(BATCH_SIZE, seed=SEED)
project_model = small_cnn(data.num_classes, image_size=IMAGE_SIZE).to(device)
history = fit(project_model, fresh_train, fresh_val, torch.optim.Adam(project_model.parameters(), lr=LR), device,
              EPOCHS, progress=False, verbose=False)
update_bn(fresh_train, project_model, device=device)
project_model.eval()
correct = 0
with torch.no_grad():
    for x, y in val_loader:
        correct += (project_model(x.to(device)).argmax(dim=1) == y.to(device)).sum().item()
final_val_accuracy = correct / len(val_loader.dataset)
print(f"final validation accuracy: {final_val_accuracy:.2%} (target {TARGET:.0%})")
'''),
]
