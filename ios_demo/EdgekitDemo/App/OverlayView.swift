import SwiftUI

/// Boxes and text over the preview: image pixels mapped as `.resizeAspectFill` shows the frame
/// (scaled to cover the view, centred).
struct OverlayView: View {
    let overlay: Overlay

    var body: some View {
        GeometryReader { geometry in
            let size = geometry.size
            let image = overlay.imageSize
            let scale = image.width > 0 && image.height > 0
                ? max(size.width / image.width, size.height / image.height) : 0
            let dx = (size.width - image.width * scale) / 2
            let dy = (size.height - image.height * scale) / 2
            ZStack(alignment: .topLeading) {
                ForEach(overlay.boxes) { box in
                    let r = CGRect(x: dx + box.rect.minX * scale, y: dy + box.rect.minY * scale,
                                   width: box.rect.width * scale, height: box.rect.height * scale)
                    Rectangle()
                        .stroke(Color.green, lineWidth: 2)
                        .frame(width: r.width, height: r.height)
                        .offset(x: r.minX, y: r.minY)
                    Text(box.text)
                        .font(.caption)
                        .foregroundColor(.white)
                        .shadow(radius: 2)
                        .offset(x: r.minX, y: r.minY - 18)
                }
                if let headline = overlay.headline {
                    Text(headline)
                        .font(.system(size: 34, weight: .bold))
                        .foregroundColor(.white)
                        .shadow(radius: 3)
                        .padding(.top, 60)
                        .padding(.leading, 16)
                }
            }
        }
        .allowsHitTesting(false)
    }
}
